"""Dead letters without a node: the worker's record read back, copies merged into
one dead letter, and the `--cluster dead-letters` command line and table."""

from __future__ import annotations

import json
from typing import Any

import pytest

from disque.dead_letters import NotARecord, dead_queue, letters_from, parse_record
from disque.job import Job
from disque.worker import dead_letter_record
from disque_cli.cluster import VerbError, verb_args
from disque_cli.cluster_dead_letters import COLUMNS, age_text, json_row, row, trim_errors
from disque_cli.main import parse
from disque_cli.options import cluster_verb
from disque_cli.render import Mode

JOB_ID = "D-6492d8d4-F8kXKlg0FY+gvohSMrUkAdCv-2711"
CTIME = 1_700_000_000_000 * 1_000_000 + 7  # ms * 1e6 + a counter, as JSCAN gives it


def shown(job_id: str, state: str, body: bytes, ctime: int = CTIME) -> dict[str, Any]:
    """A job as JSCAN ... REPLY all shows it (the library's pairs(): bytes values)."""
    return {
        "id": job_id.encode(),
        "queue": b"orders:dead",
        "state": state.encode(),
        "ctime": ctime,
        "body": body,
    }


def test_both_names_of_the_queue_name_its_dead_letter_queue() -> None:
    assert dead_queue("orders") == "orders:dead"
    assert dead_queue("orders:dead") == "orders:dead"


def test_the_workers_record_is_read_back() -> None:
    job = Job(JOB_ID, "orders", "ça va".encode())
    record = parse_record(dead_letter_record(job, 3, "ValueError: boom"))
    assert record == {
        "queue": "orders",
        "id": JOB_ID,
        "attempts": 3,
        "error": "ValueError: boom",
        "body": "ça va".encode(),
    }


def test_a_binary_body_comes_back_from_base64() -> None:
    body = bytes(range(256))
    record = parse_record(dead_letter_record(Job(JOB_ID, "blobs", body), 1, "Reject: no"))
    assert record["body"] == body


def test_only_the_queue_and_the_body_are_required() -> None:
    record = parse_record(b'{"queue": "orders", "body": "x", "attempts": "many"}')
    assert record == {"queue": "orders", "id": None, "attempts": None, "error": None, "body": b"x"}


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"hello", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "not an object (list)"),
        (b'{"queue": 5, "body": "x"}', 'no "queue"'),
        (b'{"queue": "", "body": "x"}', 'no "queue"'),
        (b'{"queue": "orders"}', 'no "body" or "body_base64"'),
        (b'{"queue": "orders", "body_base64": "not base64!"}', "not base64"),
    ],
)
def test_what_is_not_a_record_says_why(body: bytes, why: str) -> None:
    with pytest.raises(NotARecord, match=why.replace("(", r"\(").replace(")", r"\)")):
        parse_record(body)


def test_two_copies_are_one_dead_letter_queued_where_its_queued_copy_is() -> None:
    body = dead_letter_record(Job("D-orig", "orders", b"o1"), 2, "ValueError: boom")
    other = JOB_ID.replace("2711", "2712")
    letters = letters_from(
        [
            ("10.0.0.1:7711", shown(JOB_ID, "active", body)),
            ("10.0.0.2:7711", shown(JOB_ID, "queued", body)),
            ("10.0.0.2:7711", shown(other, "active", body, CTIME - 5_000_000_000)),
            ("10.0.0.3:7711", shown(other, "active", body, CTIME - 5_000_000_000)),
        ]
    )
    assert [letter.id for letter in letters] == [other, JOB_ID]  # oldest first
    older, letter = letters
    assert letter.node == "10.0.0.2:7711"
    assert letter.holders == ("10.0.0.1:7711", "10.0.0.2:7711")
    assert (letter.queue, letter.original_id, letter.attempts) == ("orders", "D-orig", 2)
    assert (letter.error, letter.body, letter.dead_queue) == (
        "ValueError: boom",
        b"o1",
        "orders:dead",
    )
    assert letter.ctime_ms == 1_700_000_000_000 and letter.replayable
    assert letter.age(now=1_700_000_060.0) == 60.0
    assert older.node is None  # queued on no node: delivered, or waiting for its RETRY


def test_a_body_that_is_not_a_record_is_listed_and_not_replayable() -> None:
    [letter] = letters_from([("10.0.0.1:7711", shown(JOB_ID, "queued", b"junk"))])
    assert not letter.replayable
    assert letter.problem == "not a dead-letter record: its body is not JSON"
    assert letter.queue is None and letter.body is None and letter.raw == b"junk"
    assert row(letter)["queue"] == "?"
    assert row(letter)["error"] == "(not a dead-letter record: its body is not JSON)"
    assert json_row(letter)["raw"] == "junk"


def test_json_rows_carry_the_body_as_text_or_base64() -> None:
    record = dead_letter_record(Job("D-orig", "blobs", b"\xff"), 1, "Reject: no")
    [letter] = letters_from([("h:1", shown(JOB_ID, "queued", record))])
    data = json_row(letter)
    assert data["body_base64"] == "/w==" and "body" not in data
    assert data["holders"] == ["h:1"] and data["node"] == "h:1"
    json.dumps(data)  # every value is JSON


def test_the_error_column_is_trimmed_to_the_width_on_one_line() -> None:
    body = dead_letter_record(Job("D-orig", "orders", b"x"), 5, "Traceback\n  " + "e" * 300)
    [letter] = letters_from([("10.0.0.1:7711", shown(JOB_ID, "queued", body))])
    rows = [row(letter)]
    assert "\n" not in rows[0]["error"]
    trim_errors(rows, 120)  # a plain table: 2 spaces between columns
    others = sum(max(len(c.title), len(str(rows[0][c.key]))) + 2 for c in COLUMNS[:-1])
    assert len(rows[0]["error"]) == 120 - others and rows[0]["error"].endswith("...")
    rows = [row(letter)]
    trim_errors(rows, 120, 3, 2)  # rich's: 3 between columns, a border each side
    assert len(rows[0]["error"]) == 120 - others - 5 - 2
    trim_errors(rows, 10)  # however narrow: the error keeps 20 columns
    assert len(rows[0]["error"]) == 20


def test_ages_read_as_a_person_reads_them() -> None:
    assert age_text(None) is None
    assert age_text(0.5) == "500ms"
    assert age_text(290) == "4m 50s"
    assert age_text(3 * 86_400 + 4 * 3600 + 59) == "3d 4h"


def verb_words(*words: str):
    verb = cluster_verb("dead-letters")
    assert verb is not None
    config = parse([], stdout_is_tty=False)
    return verb_args(config, [word.encode() for word in words], verb)


def test_the_verb_takes_replay_repeated_ids_yes_and_an_output_format() -> None:
    parsed = verb_words("127.0.0.1:7711", "orders", "--replay", "--id", "a", "--id", "b", "--yes")
    assert parsed.words == ["127.0.0.1:7711", "orders"]
    assert parsed.replay and parsed.yes and parsed.ids == ["a", "b"]
    listed = verb_words("127.0.0.1:7711", "orders:dead", "--json", "--timeout", "2")
    assert not listed.replay and listed.ids == [] and listed.mode is Mode.JSON
    assert listed.timeout == 2.0


@pytest.mark.parametrize("words", [("h:1", "q", "--id"), ("h:1", "q", "--id", "--yes")])
def test_an_id_option_without_an_id_is_refused(words: tuple[str, ...]) -> None:
    with pytest.raises(VerbError, match="--id needs a job ID"):
        verb_words(*words)
