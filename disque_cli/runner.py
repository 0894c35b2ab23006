"""Run command lines against a node and print the replies.

The one place where a command line becomes requests and output, shared by
the one-shot mode, stdin pipelines and the REPL, so they behave alike:
`help`, `N command` repetition, `connect host port`, `quit`, MONITOR
streaming, SHUTDOWN, `-r`/`-i` repetition, the `(1.52s)` timing line and
`-e` exit codes.
"""

from __future__ import annotations

import enum
import sys
import time
from collections.abc import Callable
from typing import BinaryIO, TextIO

from disque_cli import commands, helptext
from disque_cli.args import SplitError, split_args
from disque_cli.connection import Disconnected, Endpoint, Session
from disque_cli.render import Mode, RenderOptions, render
from disque_cli.replies import ErrorReply, Reply


class Outcome(enum.Enum):
    OK = "ok"
    ERROR_REPLY = "error reply"
    NOT_CONNECTED = "not connected"
    QUIT = "quit"


class ErrorExit(SystemExit):
    """-e: a command answered an error; exit with status 1."""


class Runner:
    def __init__(
        self,
        session: Session,
        options: RenderOptions,
        *,
        out: BinaryIO | None = None,
        err: TextIO | None = None,
        interval: float = 0.0,
        exit_on_error: bool = False,
        show_timing: bool = False,
        clear_screen: Callable[[], None] | None = None,
    ) -> None:
        self.session = session
        self.options = options
        self.out = out or sys.stdout.buffer
        self.err = err or sys.stderr
        self.interval = interval
        self.exit_on_error = exit_on_error  # one-shot -e: stop at the first error reply
        self.show_timing = show_timing and options.mode is Mode.STANDARD
        self.clear_screen = clear_screen
        self.hints = True
        self.saw_error_reply = False

    # ---- output ------------------------------------------------------------
    def write(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()  # grep friendly, and the REPL shows replies at once

    def warn(self, line: str) -> None:
        print(line, file=self.err, flush=True)

    # ---- one command ---------------------------------------------------------
    def execute(self, argv: list[bytes], repeat: int = 1) -> Outcome:
        """Send argv `repeat` times (forever if negative), printing every reply."""
        words = [arg.decode("utf-8", errors="surrogateescape") for arg in argv]
        name = words[0].lower()
        if name in ("help", "?"):
            self.write(helptext.help_for(words[1:]).encode())
            return Outcome.OK
        try:
            self.session.ensure_connected()
        except Disconnected as exc:
            self.warn(str(exc))
            return Outcome.NOT_CONNECTED
        entry = commands.resolve(words)
        verbatim = bool(entry and entry.verbatim)
        shape = entry.json if entry else None
        outcome = Outcome.OK
        done = 0
        while repeat < 0 or done < repeat:
            done += 1
            try:
                reply = self.session.call(*argv)
            except Disconnected as exc:
                if name == "shutdown":  # the node went away as asked
                    return Outcome.OK
                self.warn(str(exc))
                return Outcome.NOT_CONNECTED
            if isinstance(reply, ErrorReply):
                self.saw_error_reply = True
                outcome = Outcome.ERROR_REPLY
                if self.exit_on_error:
                    self.warn(reply.split(b"\0", 1)[0].decode("utf-8", errors="replace"))
                    raise ErrorExit(1)
            self.write(render(reply, self.options, verbatim=verbatim, shape=shape))
            if name == "monitor" and not isinstance(reply, ErrorReply):
                return self._stream()
            if self.interval and (repeat < 0 or done < repeat):
                time.sleep(self.interval)
        return outcome

    def _stream(self) -> Outcome:
        """MONITOR: print what the node sends until it goes away or Ctrl-C."""
        while True:
            try:
                reply: Reply = self.session.read_next()
            except Disconnected as exc:
                self.warn(str(exc))
                return Outcome.NOT_CONNECTED
            self.write(render(reply, self.options))

    # ---- one line (REPL and stdin pipelines) -----------------------------------
    def run_line(self, line: str | bytes) -> Outcome:
        try:
            argv = split_args(line)
        except SplitError:
            self.write(b"Invalid argument(s)\n")
            return Outcome.OK
        if not argv:
            return Outcome.OK
        first = argv[0].decode("utf-8", errors="surrogateescape").lower()
        if first in ("quit", "exit"):
            return Outcome.QUIT
        if first == "connect" and len(argv) in (2, 3):
            return self._connect(argv)
        if first == "clear" and len(argv) == 1 and self.clear_screen:
            self.clear_screen()
            return Outcome.OK
        if first == ":set" and len(argv) == 2:
            setting = argv[1].decode(errors="replace").lower()
            if setting in ("hints", "nohints"):
                self.hints = setting == "hints"
            else:
                self.write(b"unknown disque preference '" + argv[1] + b"'\n")
            return Outcome.OK
        repeat = 1
        if len(argv) > 1 and argv[0].isdigit() and int(argv[0]) > 0:
            repeat = int(argv[0])
            argv = argv[1:]
        start = time.monotonic()
        outcome = self.execute(argv, repeat)
        elapsed = time.monotonic() - start
        if self.show_timing and elapsed >= 0.5 and outcome is not Outcome.NOT_CONNECTED:
            self.write(b"(%.2fs)\n" % elapsed)
        return outcome

    def _connect(self, argv: list[bytes]) -> Outcome:
        host = argv[1].decode(errors="replace")
        try:
            port = int(argv[2]) if len(argv) == 3 else self.session.endpoint.port
        except ValueError:
            self.write(b"Invalid port\n")
            return Outcome.OK
        try:
            self.session.switch(Endpoint(host, port, tls=self.session.endpoint.tls))
        except Disconnected as exc:
            self.warn(str(exc))
            return Outcome.NOT_CONNECTED
        return Outcome.OK
