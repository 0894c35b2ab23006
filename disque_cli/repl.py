"""The interactive prompt: `127.0.0.1:7711> `, like redis-cli's.

prompt_toolkit reads the lines; completion and the grey syntax hints come
from the command table (`syntax.py`), history is a plain one-line-per-command
file (~/.disquecli_history, or $DISQUECLI_HISTFILE), and every line is run by
the same `Runner` as stdin pipelines. Ctrl-C clears the line (or interrupts
a blocking command), Ctrl-D exits. When the node goes away the prompt turns
into `not connected> ` and each command tries to reconnect.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.application.current import get_app
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import History, InMemoryHistory
from prompt_toolkit.layout.processors import (
    Processor,
    Transformation,
    TransformationInput,
)
from prompt_toolkit.output import Output, create_output
from prompt_toolkit.output.vt100 import Vt100_Output
from prompt_toolkit.shortcuts import clear
from prompt_toolkit.styles import Style
from prompt_toolkit.utils import is_dumb_terminal

from disque_cli import commands, helptext, syntax
from disque_cli.args import split_words
from disque_cli.connection import Disconnected, Session
from disque_cli.options import Config
from disque_cli.runner import Outcome, Runner

# The prompt is coloured in the terminal's default colour: a styled cell is always
# written, so the prompt's trailing space reaches the terminal as a space (an
# unstyled trailing space would be a cursor move, and an expect script waiting
# for `127.0.0.1:7711> ` would never see it).
STYLE = Style.from_dict({"hint": "fg:ansibrightblack", "prompt": "fg:ansidefault"})
HISTORY_LIMIT = 1000


# ---- history -------------------------------------------------------------------


def history_path() -> Path | None:
    configured = os.environ.get("DISQUECLI_HISTFILE")
    if configured is not None:
        return None if configured in ("", "/dev/null") else Path(configured).expanduser()
    home = os.environ.get("HOME")
    return Path(home) / ".disquecli_history" if home else None


class PlainHistory(History):
    """History as plain lines (like redis-cli's), newest last, in a file only its owner
    reads; lines with a password are not kept."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def load_history_strings(self) -> Iterable[str]:
        try:
            lines = self.path.read_text(errors="replace").splitlines()
        except OSError:
            return []
        return list(reversed([line for line in lines if line.strip()][-HISTORY_LIMIT:]))

    def store_string(self, string: str) -> None:
        if is_sensitive(string):
            return
        try:
            # Owner-only, as redis-cli's (an older file is narrowed too):
            # the file shows what was typed.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "a") as f:
                f.write(string.replace("\n", " ") + "\n")
        except OSError:
            pass  # a read-only home must not break the prompt


# CONFIG SET parameters whose value is a secret (redis-cli leaves out its own:
# requirepass, masterauth, ...; Disque's are these).
SECRET_PARAMETERS = frozenset(
    {
        "requirepass",
        "cluster-password",
        "masterauth",
        "tls-key-file-pass",
        "tls-client-key-file-pass",
    }
)


def is_sensitive(line: str) -> bool:
    """A line that carries a password, never written to the history (redis-cli's
    isSensitiveCommand): AUTH, HELLO ... AUTH, CONFIG SET of a secret."""
    words = [w.lower() for w in (_command_words(line) or line.split())]
    if not words:
        return False
    if words[0] == "auth":
        return True
    if words[0] == "hello":
        return "auth" in words[2:]
    if words[:2] == ["config", "set"]:
        return any(name in SECRET_PARAMETERS for name in words[2::2])
    return False


# ---- what you see while typing -------------------------------------------------------


def _command_words(text: str) -> list[str] | None:
    """The words of a line as far as hints go: without a leading repeat count."""
    words = split_words(text)
    if words and len(words) > 1 and words[0].isdigit():
        words = words[1:]
    return words


def hint_text(text: str) -> str:
    """The grey hint shown after `text`, with its leading space when needed."""
    words = _command_words(text)
    if not words or words[0].lower() in ("help", "?"):
        return ""
    found = syntax.hint(words)
    if not found:
        return ""
    return found if text[-1:].isspace() else " " + found


class HintProcessor(Processor):
    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def apply_transformation(self, ti: TransformationInput) -> Transformation:
        document = ti.document
        # No hint on an accepted line: it stays on screen above the reply.
        if not self.runner.hints or ti.lineno != document.line_count - 1 or get_app().is_done:
            return Transformation(ti.fragments)
        hint = hint_text(document.text)
        if not hint:
            return Transformation(ti.fragments)
        return Transformation(list(ti.fragments) + [("class:hint", hint)])


def _match_case(candidate: str, typed: str, reference: str) -> str:
    """Complete in the user's case: `addj<tab>` gives `addjob`, `ADDJ<tab>` `ADDJOB`."""
    if not candidate.isupper():
        return candidate
    sample = typed if any(c.isalpha() for c in typed) else reference
    return candidate.lower() if sample and sample.islower() else candidate


class DisqueCompleter(Completer):
    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        text = document.text_before_cursor
        words = _command_words(text)
        if words is None:
            return
        if text and not text[-1].isspace() and words:
            partial, before = words[-1], words[:-1]
        else:
            partial, before = "", words
        if before and before[0].lower() in ("help", "?"):
            topics = _help_topics(before[1:])
        else:
            topics = syntax.candidates(before)
        reference = before[0] if before else partial
        for candidate in topics:
            if candidate.lower().startswith(partial.lower()):
                yield Completion(
                    _match_case(candidate, partial, reference), start_position=-len(partial)
                )


def _help_topics(after_help: list[str]) -> list[str]:
    if not after_help:
        return [topic for topic in helptext.topics() if " " not in topic]
    command = commands.lookup(after_help[0])
    if len(after_help) == 1 and command is not None:
        return [sub.words[1] for sub in command.subcommands]
    return []


# ---- the loop ----------------------------------------------------------------------------


def _load_preferences(runner: Runner) -> None:
    """~/.disqueclirc: `:set hints` / `:set nohints` lines, like ~/.redisclirc."""
    home = os.environ.get("HOME")
    if not home:
        return
    try:
        lines = (Path(home) / ".disqueclirc").read_text(errors="replace").splitlines()
    except OSError:
        return
    for line in lines:
        if line.strip().startswith(":set"):
            runner.run_line(line)


def terminal_output() -> Output | None:
    """The terminal, never asked where its cursor is.

    prompt_toolkit asks (CPR) to size its menus; a terminal that does not answer
    (pexpect and expect scripts, CI runners, emacs shells) costs a wait and a
    warning at start and a second per command. redis-cli never asks, neither do
    we. None on a dumb terminal: prompt_toolkit then uses its plain prompt."""
    if is_dumb_terminal():
        return None
    output = create_output()
    if isinstance(output, Vt100_Output):
        output.enable_cpr = False
    return output


def run(session: Session, config: Config) -> int:
    try:
        session.connect()
    except Disconnected as exc:
        print(exc, file=sys.stderr)
    runner = Runner(
        session,
        config.render,
        interval=config.interval or 0.0,
        show_timing=True,
        clear_screen=clear,
    )
    _load_preferences(runner)
    path = history_path()
    prompt_session: PromptSession[str] = PromptSession(
        history=PlainHistory(path) if path else InMemoryHistory(),
        completer=DisqueCompleter(),
        complete_while_typing=False,
        input_processors=[HintProcessor(runner)],
        style=STYLE,
        output=terminal_output(),
    )

    def prompt_text() -> list[tuple[str, str]]:
        text = f"{session.endpoint.label}> " if session.connected else "not connected> "
        return [("class:prompt", text)]

    while True:
        try:
            line = prompt_session.prompt(prompt_text)
        except KeyboardInterrupt:
            continue  # Ctrl-C clears the line
        except EOFError:
            break  # Ctrl-D
        try:
            outcome = runner.run_line(line)
        except KeyboardInterrupt:
            # A blocking command (GETJOB, MONITOR) was interrupted; its connection
            # is out of sync and closed: open a fresh one for the next command.
            print(file=sys.stdout, flush=True)
            try:
                session.connect()
            except Disconnected:
                pass
            continue
        if outcome is Outcome.QUIT:
            break
    return 0
