"""--cluster dead-letters: a queue's dead letters on every node, listed or replayed.

    dead-letters host:port queue                 one line per dead letter: its ID,
                                                 the node it is queued on, the
                                                 original queue, attempts, age, error
    dead-letters host:port queue --replay        each one's original body back on
        [--id JOBID ...] [--yes]                 its original queue (ADDJOB), then
                                                 ACKJOB of the dead letter

Finding and replaying are the library's (disque/dead_letters.py), so that a
program does the same without the CLI; this module prints, asks and exits as
the other verbs do: 0 when everything went well, 1 when a node did not
answer, an --id names no dead letter or a replay failed.
"""

from __future__ import annotations

import base64
import shutil
from typing import Any

from disque.client import Client
from disque.dead_letters import DeadLetter, Found, dead_queue, find_dead_letters, replay
from disque.errors import DisqueError
from disque_cli.cluster import (
    NODE_TIMEOUT,
    Column,
    Member,
    Output,
    VerbArgs,
    VerbError,
    confirmed,
    plural,
)
from disque_cli.cluster_verbs import on_seed
from disque_cli.render import Mode, dumps
from disque_cli.waiting import duration

USAGE = "dead-letters host:port queue [--replay] [--id JOBID] [--yes] [--timeout SECS]"
MIN_ERROR_WIDTH = 20  # the error column keeps this much however narrow the terminal
# What a table adds to its cells: between two columns and at its edges.
RICH_SPACING = (3, 2)  # a padding each side and a separator; a border each side
PLAIN_SPACING = (2, 0)

COLUMNS = (
    Column("id", "ID"),
    Column("node", "Queued on"),
    Column("queue", "Queue"),
    Column("attempts", "Attempts", numeric=True),
    Column("age", "Age", numeric=True),
    Column("error", "Error"),
)


def cluster_dead_letters(parsed: VerbArgs) -> int:
    out = Output(parsed.mode)
    # Seconds for each node's replies; --timeout 0: no limit.
    timeout = NODE_TIMEOUT if parsed.timeout is None else parsed.timeout or None

    def run(members: list[Member]) -> int:
        if len(parsed.words) != 1:
            raise VerbError(f"Usage: disque --cluster {USAGE}")
        seed = members[0]
        with Client(
            seed.label,
            password=parsed.password,
            tls=parsed.tls,
            stay=True,
            max_moves=1,
            socket_timeout=timeout,
            connect_timeout=min(timeout or NODE_TIMEOUT, NODE_TIMEOUT),
        ) as client:
            return DeadLetters(out, parsed, seed, client, parsed.words[0], timeout).run()

    return on_seed(parsed, out, USAGE, run, timeout or NODE_TIMEOUT)


class DeadLetters:
    def __init__(
        self,
        out: Output,
        parsed: VerbArgs,
        seed: Member,
        client: Client,
        queue: str,
        timeout: float | None,
    ) -> None:
        self.out = out
        self.parsed = parsed
        self.seed = seed
        self.client = client
        self.queue = dead_queue(queue)
        self.timeout = timeout

    def run(self) -> int:
        try:
            found = find_dead_letters(self.client, self.queue, self.timeout)
        except DisqueError as exc:
            self.out.error(f"{self.seed.name}: {exc}")
            return 1
        self.unreachable(found)
        letters = self.chosen(found.letters)
        if letters is None:
            if self.parsed.replay:
                self.out.line("Nothing was replayed.")
            return 1
        if self.parsed.replay:
            return self.replay(letters)
        self.show(letters)
        for letter in letters:
            if not letter.replayable:
                self.out.warn(
                    f"{letter.id} ({letter.node or letter.holders[0]}) is {letter.problem}: "
                    f"--replay leaves it; read it with `{self.seed.cli('show', letter.id)}`"
                )
        return 1 if self.out.errors else 0

    def unreachable(self, found: Found) -> None:
        for where, why in found.unreachable.items():
            self.out.error(
                f"{where}: {why}: its dead letters with no copy on another node are missing"
            )

    def chosen(self, letters: list[DeadLetter]) -> list[DeadLetter] | None:
        """The dead letters --id names (all without --id); None, after an [ERR] for
        each, when an --id names none of them."""
        if not self.parsed.ids:
            return letters
        by_id = {letter.id: letter for letter in letters}
        unknown = [job_id for job_id in self.parsed.ids if job_id not in by_id]
        for job_id in unknown:
            self.out.error(f"No dead letter {job_id} in {self.queue} on the nodes that answered.")
        if unknown:
            return None
        return [by_id[job_id] for job_id in dict.fromkeys(self.parsed.ids)]

    # ---- list ----
    def show(self, letters: list[DeadLetter]) -> None:
        if self.out.mode is Mode.JSON:
            self.out.out.write(dumps([json_row(letter) for letter in letters]) + "\n")
            self.out.out.flush()
        elif not letters and not self.out.data_only:
            self.out.ok(f"No dead letters in {self.queue}.")
        else:
            rows = [row(letter) for letter in letters]
            if not self.out.data_only:
                spacing = RICH_SPACING if self.out.rich else PLAIN_SPACING
                trim_errors(rows, self.width(), *spacing)
            title = f"{plural(len(letters), 'dead letter')} in {self.queue}"
            self.out.table(COLUMNS, rows, title=f"{title} (seen from {self.seed.label})")

    def width(self) -> int:
        if self.out.rich:
            return self.out.console.width
        return shutil.get_terminal_size((120, 24)).columns

    # ---- replay ----
    def replay(self, letters: list[DeadLetter]) -> int:
        out = self.out
        for letter in letters:
            if not letter.replayable:
                out.error(f"{letter.id} is {letter.problem}: left in {self.queue}, not replayed.")
        todo = [letter for letter in letters if letter.replayable]
        if not todo:
            if not letters:
                out.ok(f"No dead letters in {self.queue}: nothing to replay.")
            if out.mode is Mode.JSON:
                out.out.write("[]\n")
            return 1 if out.errors else 0
        if out.mode is not Mode.JSON:
            self.show(todo)
        where = "its queue" if len(todo) == 1 else "their queues"
        question = f"Replay {plural(len(todo), 'dead letter')} to {where}?"
        if not confirmed(out, self.parsed.yes, question, "replay them"):
            return 1
        out.title(f"Replaying {plural(len(todo), 'dead letter')} of {self.queue}")
        outcomes = replay(self.client, todo, node_timeout=self.timeout)
        done = 0
        for outcome in outcomes:
            letter = outcome.letter
            if outcome.ok:
                done += 1
                out.ok(f"{letter.id}: back on {letter.queue} as {outcome.job_id}")
            else:
                out.error(f"{letter.id}: {outcome.error}")
        if out.mode is Mode.JSON:
            out.out.write(
                dumps(
                    [
                        {
                            "id": o.letter.id,
                            "queue": o.letter.queue,
                            "job_id": o.job_id,
                            "error": o.error,
                        }
                        for o in outcomes
                    ]
                )
                + "\n"
            )
            out.out.flush()
        if done == len(todo):
            out.ok(f"{plural(done, 'dead letter')} replayed and acknowledged in {self.queue}.")
        return 1 if out.errors else 0


def age_text(seconds: float | None) -> str | None:
    """``3d 4h`` past a day, else as waiting.duration writes it (``4m 50s``)."""
    if seconds is None:
        return None
    if seconds >= 86_400:
        days, rest = divmod(int(seconds), 86_400)
        return f"{days}d {rest // 3600}h"
    return duration(int(seconds * 1000))


def row(letter: DeadLetter) -> dict[str, Any]:
    """A table row: the error on one line (a traceback's lines joined)."""
    error = letter.error if letter.replayable else f"({letter.problem})"
    return {
        "id": letter.id,
        "node": letter.node,
        "queue": letter.queue if letter.replayable else "?",
        "attempts": letter.attempts,
        "age": age_text(letter.age()),
        "error": " ".join((error or "").split()) or None,
    }


def trim_errors(rows: list[dict[str, Any]], width: int, gap: int = 2, edges: int = 0) -> None:
    """Shorten the error column (the last) so that each row fits in ``width``
    columns, the table's spacing included (``gap`` between columns, ``edges``)."""
    others = [column for column in COLUMNS if column.key != "error"]
    used = sum(
        max([len(column.title), *(len(str(r.get(column.key) or "-")) for r in rows)])
        for column in others
    )
    room = max(MIN_ERROR_WIDTH, width - used - gap * len(others) - edges)
    for r in rows:
        error = r.get("error")
        if isinstance(error, str) and len(error) > room:
            r["error"] = error[: room - 3] + "..."


def json_row(letter: DeadLetter) -> dict[str, Any]:
    """Everything known of a dead letter, for --json: the body as text when it is
    UTF-8, else as base64 (as the worker's record holds it)."""
    data: dict[str, Any] = {
        "id": letter.id,
        "dead_queue": letter.dead_queue,
        "node": letter.node,
        "holders": list(letter.holders),
        "queue": letter.queue,
        "original_id": letter.original_id,
        "attempts": letter.attempts,
        "error": letter.error,
        "ctime_ms": letter.ctime_ms,
        "age_s": None if (age := letter.age()) is None else round(age, 3),
        "problem": letter.problem,
    }
    if letter.body is not None:
        try:
            data["body"] = letter.body.decode()
        except UnicodeDecodeError:
            data["body_base64"] = base64.b64encode(letter.body).decode()
    else:
        data["raw"] = letter.raw.decode(errors="replace")
    return data
