"""The cluster manager's building blocks: nodes, their views, and the output.

`--cluster <verb>` talks to several nodes at once, so everything here is
per node and never fatal: a node that cannot be reached, times out or
refuses AUTH becomes one `NodeDown` with one clear line, and the verb goes
on with the others.

    Member          one node: a `Session` (same auth and TLS as the rest of
                    the CLI) with a reply timeout, plus what we learnt of it
    ViewEntry       one line of CLUSTER NODES
    discover()      the members a seed node knows
    Output          findings (`[OK]`, `[ERR]`, `[WARN]`) and node tables:
                    rich on a terminal, aligned plain text in a pipe, CSV
                    and JSON with --csv / --json (messages then go to stderr)
    VerbArgs        the verb's own arguments and trailing options
"""

from __future__ import annotations

import csv
import io
import re
import socket
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from disque.protocol import HelloError, flat_info, parse_hello
from disque.tls import TLS, closed_hint
from disque_cli.connection import Disconnected, Endpoint, Session
from disque_cli.options import OUTPUT_FLAGS, ClusterVerb, Config
from disque_cli.render import Mode, dumps
from disque_cli.replies import ErrorReply, Reply

if TYPE_CHECKING:
    from rich.console import Console


NODE_TIMEOUT = 5.0  # seconds to connect to a node and for each of its replies
ID_PREFIX = 8  # characters of a node ID shown in tables
CLOSED = "the node closed the connection"  # what why() makes of a hang-up


class NodeDown(Exception):
    """A node cannot be reached or does not answer: str() is the reason, one line."""


class VerbError(Exception):
    """A bad --cluster command line: print the message, exit 1."""


# ---- addresses -----------------------------------------------------------------

_ADDRESS = re.compile(r"\[(?P<v6>[^\]]+)\]:(?P<port6>\d+)|(?P<host>[^\s]*):(?P<port>\d+)")


def parse_address(text: str) -> tuple[str, int] | None:
    """host:port, [v6]:port or v6:port; None when `text` is not an address."""
    match = _ADDRESS.fullmatch(text)
    if match is None:
        return None
    host = match.group("v6") or match.group("host") or "127.0.0.1"
    port = int(match.group("port6") or match.group("port"))
    return (host, port) if 0 < port < 65536 else None


def label(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def resolve_ip(host: str) -> str:
    """CLUSTER MEET wants an IP address: resolve host names (IPv4 first)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return host
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    return str(infos[0][4][0]) if infos else host


# ---- one node ----------------------------------------------------------------------


class NodeSession(Session):
    """A Session whose replies time out (a paused node must not hang the tool) and
    whose failed AUTH is fatal (the node's findings would be NOAUTH errors)."""

    def __init__(self, endpoint: Endpoint, timeout: float | None) -> None:
        super().__init__(endpoint, connect_timeout=timeout or NODE_TIMEOUT, reply_timeout=timeout)

    def connect(self) -> None:
        self.open()
        if self.endpoint.password is not None:
            reply = self.call("AUTH", self.endpoint.password)
            if isinstance(reply, ErrorReply):
                self.close()
                raise Disconnected(f"AUTH failed: {_text(reply)}")


def why(exc: Disconnected, timeout: float | None) -> str:
    """The one-line reason of a Disconnected, without the address we print anyway."""
    text = str(exc)
    text = re.sub(r"^Could not connect to Disque at \S+: ", "cannot connect: ", text)
    text = re.sub(r"^Error: ", "", text)
    if "timed out" in text.lower():
        return f"no reply within {timeout or NODE_TIMEOUT:g}s (node paused or overloaded?)"
    # A hang-up shows during the connection or at the first reply, depending on
    # timing (a TLS session refused after its handshake): one wording for both.
    if text in ("Server closed the connection", "cannot connect: Connection closed by server."):
        return CLOSED
    return text


class Member:
    """One node of the cluster as the tool sees it."""

    def __init__(
        self,
        host: str,
        port: int,
        password: str | None,
        timeout: float | None = NODE_TIMEOUT,
        node_id: str | None = None,
        tls: TLS | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.session = NodeSession(Endpoint(host, port, password, tls), timeout)
        self.id = node_id
        self.error: str | None = None  # why it could not be reached, if so
        self.view: list[ViewEntry] = []  # its CLUSTER NODES
        self.info: dict[str, str] = {}  # its INFO, flattened

    @property
    def label(self) -> str:
        return label(self.host, self.port)

    @property
    def name(self) -> str:
        """`127.0.0.1:7711 (ab12cd34)`: how findings refer to a node."""
        return f"{self.label} ({self.id[:ID_PREFIX]})" if self.id else self.label

    @property
    def up(self) -> bool:
        return self.error is None

    @property
    def tls(self) -> TLS | None:
        return self.session.endpoint.tls

    def sibling(self, host: str, port: int, node_id: str | None = None) -> Member:
        """Another node of the cluster, reached with this one's password, TLS settings
        and timeout (a node the seed lists, say)."""
        return Member(
            host or self.host, port, self.session.endpoint.password, self.timeout, node_id, self.tls
        )

    def cli(self, *command: str) -> str:
        """A `disque` command line for this node, for hints (TLS options included,
        never the password)."""
        words = ["disque", "-h", self.host, "-p", str(self.port), *tls_words(self.tls), *command]
        return " ".join(words)

    def call(self, *args: Any) -> Reply:
        try:
            return self.session.call(*args)
        except Disconnected as exc:
            raise NodeDown(why(exc, self.timeout)) from None

    def text(self, *args: Any) -> str:
        """A command whose reply is text; an error reply raises NodeDown."""
        reply = self.call(*args)
        if isinstance(reply, ErrorReply):
            raise NodeDown(f"{' '.join(map(str, args))}: {_text(reply)}")
        if isinstance(reply, bytes):
            return _text(reply)
        raise NodeDown(f"{' '.join(map(str, args))}: unexpected reply {reply!r}")

    def refresh(self, with_info: bool = True) -> bool:
        """MYID, CLUSTER NODES (and INFO): False, with self.error set, if unreachable.

        A member known by its ID is that node only: when its address answers with
        another ID (the node was replaced on the same port), the member is down,
        and the node now there is another member."""
        try:
            node_id = self.text("CLUSTER", "MYID")
            if self.id and node_id != self.id:
                self.error = f"{self.label} now answers as node {node_id[:ID_PREFIX]} (replaced?)"
                self.view, self.info = [], {}
                return False
            self.id = node_id
            self.view = parse_nodes(self.text("CLUSTER", "NODES"))
            if with_info:
                self.info = flat_info(self.text("INFO"))
        except NodeDown as exc:
            self.error = self._hint(str(exc))
            return False
        self.error = None
        return True

    def _hint(self, error: str) -> str:
        # A node that hangs up on its first command says nothing of why: a plain
        # client at a tls-port, or a TLS client without the certificate it requires.
        return error + closed_hint(self.tls) if error == CLOSED else error

    def myself(self) -> ViewEntry | None:
        return next((entry for entry in self.view if entry.myself), None)

    def number(self, field_name: str) -> int:
        try:
            return int(self.info.get(field_name, "0"))
        except ValueError:
            return 0

    def close(self) -> None:
        self.session.close()


def tls_words(tls: TLS | None) -> list[str]:
    """The options that give `tls` to disque: `--tls --cacert ca.crt`, or []."""
    if tls is None:
        return []
    words = ["--tls"]
    for flag, value in (("--cacert", tls.cacert), ("--cert", tls.cert), ("--key", tls.key)):
        if value:
            words += [flag, value]
    return words + (["--insecure"] if tls.insecure else [])


def _text(data: bytes) -> str:
    return bytes(data).decode("utf-8", errors="replace")


# ---- CLUSTER NODES -------------------------------------------------------------------


@dataclass
class ViewEntry:
    """`id ip:port flags ping_sent pong_recv link`."""

    id: str
    host: str
    port: int
    flags: set[str] = field(default_factory=set)
    link: str = "connected"
    bus_port: int = 0  # from ip:port@busport; 0: port + 10000

    @property
    def myself(self) -> bool:
        return "myself" in self.flags

    @property
    def handshake(self) -> bool:
        return "handshake" in self.flags

    @property
    def failing(self) -> set[str]:
        return self.flags & {"pfail", "fail"}

    @property
    def label(self) -> str:
        return label(self.host, self.port)


def parse_nodes(text: str) -> list[ViewEntry]:
    entries = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        address, _, bus = fields[1].partition("@")  # ip:port[@busport]
        host, _, port = address.rpartition(":")
        entries.append(
            ViewEntry(
                id=fields[0],
                host=host.strip("[]"),
                port=int(port) if port.isdigit() else 0,
                # C Disque writes PFAIL as "fail?", ours as "pfail"
                flags={"pfail" if f == "fail?" else f for f in fields[2].split(",")},
                link=fields[5] if len(fields) > 5 else "connected",
                bus_port=int(bus) if bus.isdigit() else 0,
            )
        )
    return entries


def discover(seed: Member) -> list[Member]:
    """The seed (already refreshed) and every other node it knows, seed first.

    Nodes still in handshake have no real ID yet: they are left out.
    """
    members = [seed]
    where = tls_addresses(seed)
    for entry in seed.view:
        if entry.myself or entry.handshake:
            continue
        host, port = where.get(entry.id, (entry.host, entry.port))
        members.append(seed.sibling(host, port, node_id=entry.id))
    members[1:] = sorted(members[1:], key=lambda member: (member.host, member.port))
    return members


def tls_addresses(seed: Member) -> dict[str, tuple[str, int]]:
    """Node ID -> where to reach it over TLS, which is not what CLUSTER NODES says.

    CLUSTER NODES lists client ports. Over TLS, HELLO lists each node's tls-port
    (where the node announced one), so the other nodes are reached there; a
    node without one stays at its plain port and fails its handshake with a
    clear line. Best effort: no HELLO, no change.
    """
    if seed.tls is None:
        return {}
    try:
        hello = parse_hello(seed.call("HELLO"))
    except (NodeDown, HelloError):
        return {}
    return {node.id: (node.host, node.port) for node in hello.nodes}


# ---- verb arguments -----------------------------------------------------------------


@dataclass
class VerbArgs:
    """What a verb gets: addresses and words, the global config, its options."""

    words: list[str]
    config: Config
    yes: bool = False
    shutdown: bool = False
    timeout: float | None = None
    mode: Mode = Mode.STANDARD
    start: str | None = None  # restart: the shell command that starts the node
    replay: bool = False  # dead-letters: replay them
    ids: list[str] = field(default_factory=list)  # dead-letters: only these (--id, repeated)

    @property
    def password(self) -> str | None:
        return self.config.endpoint.password

    @property
    def tls(self) -> TLS | None:
        return self.config.endpoint.tls

    def member(self, host: str, port: int, timeout: float | None = NODE_TIMEOUT) -> Member:
        """A node named on the command line, reached with the CLI's password and TLS."""
        return Member(host, port, self.password, timeout, tls=self.tls)


TRAILING_FIELDS = {
    "--yes": "yes",
    "--shutdown": "shutdown",
    "--timeout": "timeout",
    "--start": "start",
    "--replay": "replay",
    "--id": "ids",
}
TRAILING_MODES = {flag: Mode(value) for flag, value in OUTPUT_FLAGS.items()}


def trailing_options(verb: ClusterVerb) -> dict[str, str]:
    """Spelling -> VerbArgs field of the options `verb` takes after its arguments."""
    accepted: dict[str, str] = {}
    for opt in verb.options:
        for spelling in (opt.flag, *opt.aliases):
            accepted[spelling] = TRAILING_FIELDS[opt.flag]
    return accepted


def verb_args(config: Config, args: Sequence[bytes], verb: ClusterVerb) -> VerbArgs:
    """Split the words after the verb, taking its options (--yes, --timeout N, an
    output format) from among them; `call` takes none: its words are a command."""
    words = [arg.decode("utf-8", errors="surrogateescape") for arg in args]
    parsed = VerbArgs(
        [],
        config,
        yes=bool(config.cluster_yes),
        shutdown=bool(config.cluster_shutdown),
        timeout=config.cluster_timeout,
        mode=config.mode,
    )
    accepted = trailing_options(verb)
    if not verb.trailing and len(words) >= 2 and words[-2] in ("--timeout", "--cluster-timeout"):
        # (call: the words are a command, but no Disque command ends in --timeout N)
        parsed.timeout = seconds(words[-1])
        words = words[:-2]
    i = 0
    while i < len(words):
        word = words[i]
        if not verb.trailing or not word.startswith("--"):
            parsed.words.append(word)
        elif word in TRAILING_MODES:
            parsed.mode = TRAILING_MODES[word]
        elif accepted.get(word) == "timeout":
            if i + 1 == len(words):
                raise VerbError(f"{word} needs a number of seconds")
            parsed.timeout = seconds(words[i + 1])
            i += 1
        elif accepted.get(word) == "start":
            if i + 1 == len(words):
                raise VerbError(f"{word} needs a command (quoted: one word)")
            parsed.start = words[i + 1]
            i += 1
        elif accepted.get(word) == "ids":
            if i + 1 == len(words) or words[i + 1].startswith("--"):
                raise VerbError(f"{word} needs a job ID")
            parsed.ids.append(words[i + 1])
            i += 1
        elif word in accepted:
            setattr(parsed, accepted[word], True)
        else:
            raise VerbError(
                f"Unrecognized option for --cluster {verb.name}: '{word}' "
                f"(usage: disque --cluster {verb.usage})"
            )
        i += 1
    if parsed.timeout is not None and parsed.timeout < 0:
        raise VerbError("--timeout must be 0 (no limit) or more seconds")
    return parsed


def seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise VerbError(f"Invalid number of seconds: '{text}'") from None


def seed_address(parsed: VerbArgs, usage: str) -> tuple[str, int]:
    """The node to start from: the first word if it is host:port, else -h/-p."""
    if parsed.words:
        address = parse_address(parsed.words[0])
        if address is not None:
            parsed.words.pop(0)
            return address
    if parsed.config.host or parsed.config.port is not None or parsed.config.uri:
        return parsed.config.endpoint.host, parsed.config.endpoint.port
    raise VerbError(f"Usage: disque --cluster {usage}")


def open_target(
    parsed: VerbArgs, out: Output, usage: str, nothing_changed: str = "Nothing was changed."
) -> list[Member] | None:
    """The node a verb acts on (host:port, or -h/-p, and no other word) and every
    node it knows, it first; None, after an [ERR] and ``nothing_changed``, when
    it cannot be reached."""
    host, port = seed_address(parsed, usage)
    if parsed.words:
        raise VerbError(
            f"Unexpected arguments: {' '.join(parsed.words)}\nUsage: disque --cluster {usage}"
        )
    target = parsed.member(host, port)
    if not target.refresh():
        out.error(f"{target.label}: {target.error}")
        out.line(nothing_changed)
        return None
    return discover(target)


def confirmed(out: Output, yes: bool, question: str = "", what: str = "go on") -> bool:
    """``--yes``, or "yes" typed at a terminal (after ``question``); without a
    terminal, no: a mistyped address from cron or ssh must change nothing. Says
    why it is no (``what``: the action --yes would take without asking)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        out.error(
            "Standard input is not a terminal, so nobody can confirm: nothing was "
            f"changed. Give --yes to {what} without asking."
        )
        return False
    stream = out.messages
    stream.write(f"{question} Type 'yes' to go on: " if question else "Type 'yes' to go on: ")
    stream.flush()
    try:
        answer = sys.stdin.readline()
    except KeyboardInterrupt:
        stream.write("\n")
        answer = ""
    if answer.strip().lower() != "yes":
        out.line("Aborted: nothing was changed.")
        return False
    return True


def foreign_members(member: Member, known: set[str | None]) -> int:
    """How many nodes ``member`` knows that are not in ``known`` (another cluster's)."""
    return sum(
        1
        for entry in member.view
        if not entry.myself and not entry.handshake and entry.id not in known
    )


def accepting(member: Member) -> bool:
    """Whether the node's port accepts a connection (a node shutting down stops)."""
    try:
        socket.create_connection((member.host, member.port), timeout=1).close()
    except OSError:
        return False
    return True


def queue_lengths(member: Member) -> dict[str, int]:
    """Queue name -> QLEN on the node, for queues with jobs (best effort: the
    first 1000 queues QSCAN gives; {} when the node does not answer)."""
    queued: dict[str, int] = {}
    try:
        cursor: Any = b"0"
        for _ in range(10):
            reply = member.call("QSCAN", cursor, "COUNT", 100)
            if not isinstance(reply, list) or len(reply) != 2:
                break
            cursor, names = reply
            for name in names or []:
                length = member.call("QLEN", name)
                if isinstance(length, int) and length > 0:
                    queued[bytes(name).decode(errors="replace")] = length
            if cursor in (b"0", 0):
                break
    except NodeDown:
        pass
    return queued


# ---- output -----------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    numeric: bool = False


STYLES = {"OK": "green", "ERR": "bold red", "WARN": "yellow"}


class Output:
    """Where a verb prints. STANDARD: rich (colours only on a terminal); RAW: plain
    aligned text; CSV / JSON: data on stdout, messages on stderr."""

    def __init__(self, mode: Mode, out: TextIO | None = None, err: TextIO | None = None):
        self.mode = mode
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.errors = 0
        self.warnings = 0
        self._console: Console | None = None

    @property
    def data_only(self) -> bool:
        return self.mode in (Mode.CSV, Mode.JSON)

    @property
    def messages(self) -> TextIO:
        return self.err if self.data_only else self.out

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            # Not a terminal (FAKETTY, --no-raw in a pipe): tables at their natural width.
            width = None if self.messages.isatty() else 160
            self._console = Console(
                file=self.messages, highlight=False, soft_wrap=True, width=width
            )
        return self._console

    @property
    def rich(self) -> bool:
        return self.mode is Mode.STANDARD

    @property
    def live(self) -> bool:
        """Progress bars and spinners: only for a person looking at a terminal."""
        return self.rich and self.messages.isatty()

    # ---- lines ----
    def line(self, text: str = "", style: str | None = None) -> None:
        if self.rich:
            from rich.text import Text

            self.console.print(Text(text, style=style or ""))
        else:
            print(text, file=self.messages, flush=True)

    def title(self, text: str) -> None:
        self.line(f">>> {text}", "bold")

    def finding(self, level: str, text: str) -> None:
        if level == "ERR":
            self.errors += 1
        elif level == "WARN":
            self.warnings += 1
        if self.rich:
            from rich.text import Text

            line = Text(f"[{level}]", style=STYLES[level])
            line.append(f" {text}")
            self.console.print(line)
        else:
            print(f"[{level}] {text}", file=self.messages, flush=True)

    def ok(self, text: str) -> None:
        self.finding("OK", text)

    def error(self, text: str) -> None:
        self.finding("ERR", text)

    def warn(self, text: str) -> None:
        self.finding("WARN", text)

    def panel(self, title: str, lines: Sequence[str]) -> None:
        if self.rich:
            from rich.panel import Panel
            from rich.text import Text

            self.console.print(
                Panel(Text("\n".join(lines)), title=title, title_align="left", expand=False)
            )
        else:
            print(f"--- {title} ---", file=self.messages)
            for text in lines:
                print(text, file=self.messages)
            print(file=self.messages, flush=True)

    # ---- tables ----
    def table(
        self,
        columns: Sequence[Column],
        rows: Sequence[dict[str, Any]],
        title: str | None = None,
        footer: dict[str, Any] | None = None,
    ) -> None:
        if self.mode is Mode.JSON:
            self.out.write(dumps(list(rows)) + "\n")
        elif self.mode is Mode.CSV:
            buffer = io.StringIO()
            writer = csv.writer(buffer, lineterminator="\n")
            writer.writerow([column.key for column in columns])
            for row in rows:
                writer.writerow([_cell(row.get(column.key)) for column in columns])
            self.out.write(buffer.getvalue())
        elif self.rich:
            self._rich_table(columns, rows, title, footer)
        else:
            self._plain_table(columns, rows)
        self.out.flush()

    def _rich_table(
        self,
        columns: Sequence[Column],
        rows: Iterable[dict[str, Any]],
        title: str | None,
        footer: dict[str, Any] | None,
    ) -> None:
        from rich import box
        from rich.table import Table
        from rich.text import Text

        table = Table(
            title=title,
            box=box.SIMPLE_HEAD,
            show_footer=footer is not None,
            title_justify="left",
            title_style="bold",
            padding=(0, 1),
            pad_edge=False,
        )
        for column in columns:
            table.add_column(
                column.title,
                justify="right" if column.numeric else "left",
                footer=_cell((footer or {}).get(column.key, "")),
                no_wrap=True,
            )
        for row in rows:
            down = row.get("error") is not None
            table.add_row(
                *(
                    Text(
                        _cell(row.get(column.key)),
                        style="red" if down and column.key == "status" else "",
                    )
                    for column in columns
                ),
                style="dim" if down else None,
            )
        self.console.print(table)

    def _plain_table(self, columns: Sequence[Column], rows: Sequence[dict[str, Any]]) -> None:
        cells = [[column.title.lower().replace(" ", "_") for column in columns]]
        cells += [[_cell(row.get(column.key)) for column in columns] for row in rows]
        widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
        for line in cells:
            text = "  ".join(
                value.rjust(width)
                if column.numeric and line is not cells[0]
                else value.ljust(width)
                for value, width, column in zip(line, widths, columns, strict=True)
            )
            print(text.rstrip(), file=self.out)


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
