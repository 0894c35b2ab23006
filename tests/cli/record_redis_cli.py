"""Record what /usr/bin/redis-cli prints for the reply shapes of cli_cases.py.

    python tests/cli/record_redis_cli.py

starts a throw-away redis-server, sends every case once over a raw socket to
keep the exact reply bytes, runs redis-cli on it in each output mode, and
writes tests/cli/fixtures/redis_cli_outputs.json. test_cli_render.py renders
the same bytes with disque's renderers and compares, so the comparison runs
where no redis-server is installed.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))  # (the checkout: testkit.processes)

from cli_cases import CASES  # noqa: E402

from testkit.processes import ServerProcess, free_port  # noqa: E402

MODES = {"standard": ["--no-raw"], "raw": ["--raw"], "csv": ["--csv"]}


def pack(args: list[str]) -> bytes:
    out = b"*%d\r\n" % len(args)
    for arg in args:
        data = arg.encode()
        out += b"$%d\r\n%s\r\n" % (len(data), data)
    return out


def read_reply_bytes(sock: socket.socket, args: list[str]) -> bytes:
    """Send a command on a fresh connection and read until the server stops talking."""
    sock.sendall(pack(args))
    sock.settimeout(0.5)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return data
        if not chunk:
            return data
        data += chunk


def main() -> None:
    port = free_port(bus=False)
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"]
        server = ServerProcess("redis-server", [*argv, "--dir", tmp], port, Path(tmp) / "log")
        server.start()
        try:
            version = subprocess.run(
                ["redis-cli", "--version"], capture_output=True, text=True
            ).stdout.strip()
            cases = {}
            for name, args in CASES.items():
                with socket.create_connection(("127.0.0.1", port)) as sock:
                    resp = read_reply_bytes(sock, args)
                outputs = {}
                for mode, flags in MODES.items():
                    result = subprocess.run(
                        ["redis-cli", "-p", str(port), *flags, *args],
                        capture_output=True,
                        env=dict(os.environ, REDISCLI_HISTFILE="/dev/null"),
                    )
                    outputs[mode] = base64.b64encode(result.stdout).decode()
                cases[name] = {
                    "args": args,
                    "resp": base64.b64encode(resp).decode(),
                    "outputs": outputs,
                }
        finally:
            server.terminate()
    target = HERE / "fixtures" / "redis_cli_outputs.json"
    target.write_text(json.dumps({"recorded_with": version, "cases": cases}, indent=1) + "\n")
    print(f"{len(cases)} cases recorded with {version} into {target}")


if __name__ == "__main__":
    main()
