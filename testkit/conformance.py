"""Replay a command script against a node and compare with a Disque 1.0-rc1 recording.

An importable port of the reference tools (`conform.py` and `transcript.py`
of the shared reference): the transcript parser, the normalisation that masks
values changing from run to run, and the replay loop. It also provides `Conn`,
a raw RESP2/RESP3 client used by the tests that need exact reply types and
error texts (redis-py hides both).

Reply trees are tuples `(type, value)`: `("+", str)`, `("-", str)`,
`(":", int)`, `("$", str)`, `("nil", None)` (RESP2 null bulk or null array),
`("*", [trees])`; RESP3 adds `("_", None)`, `("%", [(key, value), ...])`,
`("~", [trees])`, `("#", bool)`, `(",", str)`, `("(", int)`, `("=", str)`,
`(">", [trees])`.
"""

from __future__ import annotations

import re
import shlex
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hiredis

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "reference"
SINGLE_NODE_SCRIPT = REFERENCE_DIR / "script-single-node.txt"
SINGLE_NODE_GOLDEN = REFERENCE_DIR / "disque-1.0-rc1-single-node.txt"
CLUSTER_SCRIPT = REFERENCE_DIR / "script-cluster.txt"
CLUSTER_GOLDEN = REFERENCE_DIR / "disque-1.0-rc1-cluster.txt"

JOBID = re.compile(r"D-[0-9a-f]{8}-[A-Za-z0-9+/]{24}-[0-9a-f]{4}")
NODEID = re.compile(r"\b[0-9a-f]{40}\b")
VOLATILE_KEYS = {
    "ctime",
    "next-requeue-within",
    "next-awake-within",
    "ttl",
    "age",
    "idle",
    "import-rate",
}
SKIP_CMDS = {"TIME", "CLIENT", "COMMAND", "SLOWLOG", "LATENCY", "DEBUG"}
# SHOW's fields (and JSCAN REPLY ALL's), in Disque's order: written here again on
# purpose, an oracle the node's own list (Job.show_pairs) is checked against.
SHOW_KEYS = [
    "id",
    "queue",
    "state",
    "repl",
    "ttl",
    "ctime",
    "delay",
    "retry",
    "nacks",
    "additional-deliveries",
    "nodes-delivered",
    "nodes-confirmed",
    "next-requeue-within",
    "next-awake-within",
    "body",
]

Tree = tuple[str, Any]


# ---------------------------------------------------------------------------
# Raw RESP connection
# ---------------------------------------------------------------------------


def encode(args: list[Any] | tuple[Any, ...]) -> bytes:
    """Encode a command as a RESP multibulk (hiredis's encoder)."""
    return hiredis.pack_command(tuple(args))


class Conn:
    """A minimal RESP2/RESP3 client over a plain socket, returning typed trees."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.f = self.sock.makefile("rb")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def call(self, *args: Any) -> Tree:
        """call("PING") or call(["PING"]): send one command, read one reply."""
        if len(args) == 1 and isinstance(args[0], list | tuple):
            args = tuple(args[0])
        self.send(encode(args))
        return self.read()

    def readline(self) -> bytes:
        line = self.f.readline()
        if not line:
            raise ConnectionError("connection closed by the server")
        if not line.endswith(b"\r\n"):
            raise ValueError(f"bad reply line {line!r}")
        return line[:-2]

    def read(self) -> Tree:
        line = self.readline()
        t, rest = line[:1], line[1:].decode(errors="replace")
        if t == b"+":
            return ("+", rest)
        if t == b"-":
            return ("-", rest)
        if t == b":":
            return (":", int(rest))
        if t in (b"$", b"="):
            n = int(rest)
            if n < 0:
                return ("nil", None)
            data = self.f.read(n + 2)[:-2]
            return ("$" if t == b"$" else "=", data.decode(errors="replace"))
        if t in (b"*", b"~", b">"):
            n = int(rest)
            if n < 0:
                return ("nil", None)
            return (t.decode(), [self.read() for _ in range(n)])
        if t == b"%":
            n = int(rest)
            return ("%", [(self.read(), self.read()) for _ in range(n)])
        if t == b"|":  # attribute: skip it, return the reply it decorates
            n = int(rest)
            for _ in range(2 * n):
                self.read()
            return self.read()
        if t == b"_":
            return ("_", None)
        if t == b"#":
            return ("#", rest == "t")
        if t == b",":
            return (",", rest)
        if t == b"(":
            return ("(", int(rest))
        raise ValueError(f"unknown reply type in {line!r}")

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True when the server closed the connection (EOF) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except TimeoutError:
            return False
        except OSError:
            return True

    def close(self) -> None:
        try:
            self.f.close()
        finally:
            self.sock.close()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def plain(tree: Tree) -> Any:
    """A typed tree as plain Python values (maps become dicts keyed by strings)."""
    t, v = tree
    if t in ("*", "~", ">"):
        return [plain(k) for k in v]
    if t == "%":
        return {plain(k): plain(x) for k, x in v}
    if t in ("nil", "_"):
        return None
    return v


def pairs(flat: list[Any] | None) -> dict[str, Any] | None:
    """A flat [key, value, key, value ...] reply (redis-py, bytes keys) as a dict
    keyed by str; None stays None."""
    if flat is None:
        return None
    keys = [k.decode() if isinstance(k, bytes) else k for k in flat[0::2]]
    return dict(zip(keys, flat[1::2], strict=True))


# ---------------------------------------------------------------------------
# Recording parser, normalisation, rendering (port of conform.py)
# ---------------------------------------------------------------------------


def parse_golden(path: str | Path) -> list[tuple[int, str, Tree]]:
    """-> list of (port, command line, reply tree) from a transcript file."""
    lines = Path(path).read_text().split("\n")

    def node(i: int, depth: int) -> tuple[Tree, int]:
        body = lines[i][2 * depth :]
        if body.startswith("*"):
            n = int(body[1:])
            i += 1
            kids = []
            for _ in range(n):
                k, i = node(i, depth + 1)
                kids.append(k)
            return ("*", kids), i
        if body.startswith('"'):
            if body == '""':
                return ("$", ""), i + 1
            text = body[1:]
            # bulk strings may span lines (INFO): read until the closing-quote line
            while not text.endswith('"'):
                i += 1
                text += "\n" + lines[i]
            return ("$", text[:-1]), i + 1
        if body == "(nil)":
            return ("nil", None), i + 1
        if body.startswith(":"):
            return (":", int(body[1:])), i + 1
        return (body[0], body[1:]), i + 1

    out: list[tuple[int, str, Tree]] = []
    i = 0
    while i < len(lines):
        m = re.match(r"> \[(\d+)\] (.*)", lines[i])
        if not m:
            i += 1
            continue
        tree, i = node(i + 1, 1)
        out.append((int(m.group(1)), m.group(2), tree))
    return out


def norm_str(s: str, ports: dict[str, str]) -> str:
    s = ports.get(s, s)
    s = JOBID.sub("<JOBID>", s)
    return NODEID.sub("<NODEID>", s)


def norm(tree: Tree, cmd: str, ports: dict[str, str] | None = None) -> Tree:
    """Mask the run-dependent parts of a reply to the command line `cmd`."""
    ports = ports or {}
    t, v = tree
    head = cmd.split()[0].upper()
    if head == "INFO" and t == "$":
        return (
            "$",
            tuple(line.split(":")[0] for line in v.replace("\r", "").split("\n") if line.strip()),
        )
    if head == "CLUSTER" and t == "$":  # NODES / INFO: field names and shapes
        rows = [line.split() for line in v.replace("\r", "").split("\n") if line.strip()]
        return ("$", tuple((norm_str(r[0], ports) if r else "", len(r)) for r in rows))
    if t == "*":
        kids = [norm(k, cmd, ports) for k in v]
        if head == "CONFIG" and cmd.split()[-1] == "*":
            return ("*set", frozenset(k[1] for k in kids[0::2]))
        out: list[Tree] = []
        for j, k in enumerate(kids):
            prev = kids[j - 1] if j else None
            if prev and prev[0] == "$" and prev[1] in VOLATILE_KEYS and k[0] == ":":
                k = (":", "<INT>")
            if prev and prev[0] == "$" and prev[1] == "nodes-delivered" and k[0] == "*":
                k = ("*set", frozenset(map(repr, k[1])))
            out.append(k)
        if head == "HELLO" and len(out) >= 2:  # node order is not defined
            out = out[:2] + [("*set", frozenset(map(repr, out[2:])))]
        if head in ("JSCAN", "QSCAN") and len(out) == 2 and out[1][0] == "*":
            out[1] = ("*set", frozenset(map(repr, out[1][1])))
        return ("*", tuple(out))
    if t in ("$", "+", "-"):
        return (t, norm_str(v, ports))
    return (t, v)


def render(tree: Tree) -> str:
    t, v = tree
    if t == "*":
        return "[" + ", ".join(render(k) for k in v) + "]"
    if t == "*set":
        return "{" + ", ".join(sorted(map(str, v))) + "}"
    if t == "nil":
        return "nil"
    if t == ":":
        return str(v)
    return t + repr(v)[:120]


def bad_job_ids(tree: Tree) -> list[str]:
    """40-character `D-...` strings in a reply that are not well-formed job IDs."""
    bad = []
    for s in re.findall(r"D-\S+", render(tree)):
        s = s.strip("'\",]")
        if len(s) == 40 and not JOBID.fullmatch(s):
            bad.append(s)
    return bad


# ---------------------------------------------------------------------------
# Replay
# ---------------------------------------------------------------------------


@dataclass
class Mismatch:
    port: int
    line: str
    want: str
    got: str

    def __str__(self) -> str:
        return f"MISMATCH [{self.port}] {self.line}\n  want {self.want}\n  got  {self.got}"


@dataclass
class Result:
    passed: int = 0
    failed: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)

    def report(self) -> str:
        return (
            "\n".join(map(str, self.mismatches)) + f"\n{self.passed} passed, {self.failed} failed"
        )


def replay(golden: str | Path, script: str | Path, base_port: int, timeout: float = 10.0) -> Result:
    """Send every command of `script` to the node(s) at `base_port`+ and compare
    each reply with the recording `golden`. Ports of the recording map in order
    onto base_port, base_port+1, ..."""
    expected = parse_golden(golden)
    ref_ports = sorted({p for p, _, _ in expected})
    port_map = {p: base_port + (p - ref_ports[0]) for p in ref_ports}
    ports = {str(live): str(ref) for ref, live in port_map.items()}
    conns: dict[int, Conn] = {}
    env: dict[str, str] = {}
    cur = ref_ports[0]
    k = 0
    result = Result()
    try:
        for raw in Path(script).read_text().split("\n"):
            line = raw.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            if line.startswith("!sleep "):
                time.sleep(float(line.split()[1]))
                continue
            if line.startswith("!port "):
                cur = int(line.split()[1])
                continue
            store = None
            volatile = line.startswith("~ ")
            if volatile:  # sent, not compared: its reply depends on timing
                line = line[2:]
            if "=>" in line:
                line, store = (x.strip() for x in line.rsplit("=>", 1))
            for name, val in sorted(env.items(), key=lambda kv: -len(kv[0])):
                line = line.replace("$" + name, val)
            _, gcmd, gtree = expected[k]
            k += 1
            port = port_map[cur]
            try:
                if port not in conns:
                    conns[port] = Conn(port, timeout=timeout)
                got = conns[port].call(shlex.split(line))
            except Exception as e:  # connection dropped, bad framing, timeout
                got = ("!", f"{type(e).__name__}: {e}")
                dropped = conns.pop(port, None)
                if dropped:
                    dropped.close()
            if store and got[0] in ("$", "+"):
                env[store] = got[1]
            if volatile or line.split()[0].upper() in SKIP_CMDS:
                continue
            ok = norm(got, line, ports) == norm(gtree, gcmd, ports) and not bad_job_ids(got)
            if ok:
                result.passed += 1
            else:
                result.failed += 1
                result.mismatches.append(
                    Mismatch(
                        cur, line, render(norm(gtree, gcmd, ports)), render(norm(got, line, ports))
                    )
                )
    finally:
        for c in conns.values():
            c.close()
    return result


def main(argv: list[str]) -> int:
    """conformance.py GOLDEN SCRIPT [PORT]: the same as the reference conform.py."""
    port = int(argv[3]) if len(argv) > 3 else 7711
    result = replay(argv[1], argv[2], port)
    print(result.report())
    return 1 if result.failed else 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv))
